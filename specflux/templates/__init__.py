"""Packaged templates (specflux.templates); a workspace overrides them in .specflux/templates/."""

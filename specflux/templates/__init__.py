"""Packaged templates (installed as specflux.templates); a workspace overrides them in .specflux/templates/."""

"""The command line: a dispatcher over the library (parsing, one module per command group, output)."""

"""The build driver: everything that touches the file system and the outside world.

``sources`` reads .tri files into the database's inputs; ``session`` opens and saves the
persistent database; ``check`` collects and prints diagnostics.
"""

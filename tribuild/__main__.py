from tribuild.cli import entry

entry()

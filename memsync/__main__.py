"""`python -m memsync` runs the command line."""

from memsync.cli import main

if __name__ == "__main__":
    main()

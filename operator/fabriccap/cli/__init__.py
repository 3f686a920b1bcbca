"""The command line: argparse only. ``commands`` parses, calls one function and prints;
``completion`` writes bash and zsh completion from the same parser."""

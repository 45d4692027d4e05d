"""Pure validators: tree views in, Reports of Problems out. Nothing here opens files or runs git."""

"""One module per lane."""

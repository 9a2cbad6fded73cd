"""Results contract, result store and DuckDB views. Imports nothing of the other packages."""

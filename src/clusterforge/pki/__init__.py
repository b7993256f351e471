"""Keys, certificates, password hashes, generated secrets and the security plugin's files."""

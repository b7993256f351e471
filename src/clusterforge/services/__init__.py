"""The two applications the toolkit deploys: the user directory and the order service."""

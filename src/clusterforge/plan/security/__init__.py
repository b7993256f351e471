"""The security every part speaks: the cluster's one TLS profile, the company directory (LDAP) and
its syntax, the toolkit's own users."""

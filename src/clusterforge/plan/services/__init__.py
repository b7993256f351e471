"""The services beside the cluster: their settings, databases, TLS proxy, wheelhouses and the order
service's delivery into the cluster."""

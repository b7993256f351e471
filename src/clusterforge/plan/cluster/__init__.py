"""The cluster: the typed model and its checks, the host variables it is built from, its PKI and
host certificates, every file a node gets, rollout, restarts and removal, the cluster's objects, the
engine and plugin archives, the console."""

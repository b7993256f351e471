"""The local lab: a docker engine, a locally built systemd image, and node containers.

The lab is a convenience for developers and CI; the playbooks treat its containers as
ordinary hosts reached over SSH.
"""

"""The code that runs on the hosts, not on the control node: the runners the systemd
timers start (scheduled snapshots, :mod:`.snapshots`; the index lifecycle,
:mod:`.lifecycle`) and what they share (:mod:`.common`).

The plan ships these files as they are (``runner_files`` of its snapshot schedule and
lifecycle sections) into a directory of their own on each node, where the node's
``python3 -I`` runs them through :mod:`.__main__`. The hosts have no library installed,
so every module here imports the standard library and this package only, and only
relatively (the package's name on a host is its directory's); tests/test_host_runners.py
runs a copy of the package alone with ``python3 -I`` to hold that.
"""

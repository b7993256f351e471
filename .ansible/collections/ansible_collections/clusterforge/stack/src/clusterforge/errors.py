"""One exception tree for the whole library.

Every error the toolkit raises on purpose derives from :class:`ClusterforgeError`, so a
caller (the CLI, an Ansible action plugin) can catch one class and print its message,
which always says what to change.
"""


class ClusterforgeError(Exception):
    """Base class of every error clusterforge raises on purpose."""


class InventoryError(ClusterforgeError):
    """The inventory describes a cluster that cannot work; the message lists every problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"the inventory has {len(problems)} problem(s):\n{lines}")


class ArtifactError(ClusterforgeError):
    """An archive could not be fetched, verified or read."""


class LabError(ClusterforgeError):
    """The local lab could not be brought up or torn down."""

"""Files that hold secrets (settings, tokens) are read only when other users cannot.

The rule is the kit's, one for both services (``clusterforge_service_kit.private_files``);
this module keeps the names the user directory has always had. Standard library only:
the client (without the server extra) checks its YAML file with it, and the toolkit's
plan loads ``settings.py``, which imports it, on the control node.
"""

from __future__ import annotations

from clusterforge_service_kit.private_files import PrivateFileError as SettingsFileError
from clusterforge_service_kit.private_files import check_private_file, read_private_text

__all__ = ["SettingsFileError", "check_private_file", "read_private_text"]

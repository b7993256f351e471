"""Which database URLs the services take: a SQLite file, or PostgreSQL through psycopg.

Standard library only (the toolkit's plan checks the services' settings with it). The
messages never repeat the URL: it is the one setting allowed to carry a password.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DATABASE_URL_PREFIXES = ("sqlite:///", "postgresql+psycopg://")
DATABASE_URL_FIX = (
    "set it to sqlite:///<path of the database file> or "
    "postgresql+psycopg://<user>[:<password>]@<host>[:<port>]/<database>"
)


def check_database_url(url: str) -> None:
    """Raise ValueError for a URL neither service can use."""
    if not url.startswith(DATABASE_URL_PREFIXES):
        raise ValueError(f"the database URL has an unsupported scheme; {DATABASE_URL_FIX}")
    if url.startswith("sqlite:///"):
        location, options, _fragment = url.removeprefix("sqlite:///").partition("?")
        if options or "?" in url:
            # The services set what SQLite needs themselves (the busy timeout, threads);
            # SQLAlchemy hands a URL's options to sqlite3 untyped (timeout=abc was a
            # TypeError at the first connection), and uri=true opens file: URIs, an
            # in-memory database (mode=memory) among them.
            raise ValueError(
                "the SQLite URL has options (?...), which the service does not take (it "
                f"sets SQLite's busy timeout itself); remove them and {DATABASE_URL_FIX}"
            )
        if not location or location.startswith(":memory:") or location.startswith("file:"):
            raise ValueError(
                "the database URL names no SQLite file (an in-memory database is lost at "
                "each start and not shared between processes; a file: URI is not taken); "
                f"{DATABASE_URL_FIX}"
            )
        if any(not character.isprintable() for character in location):
            raise ValueError(
                f"the SQLite file's path holds a control character; {DATABASE_URL_FIX}"
            )
        return
    # Host and database may both be absent (libpq then takes the Unix socket and the
    # user's name, or ?host=/run/postgresql), so only the syntax is checked here.
    try:
        port = urlsplit(url).port
    except ValueError:
        raise ValueError(f"the database URL cannot be parsed; {DATABASE_URL_FIX}") from None
    if port == 0:
        raise ValueError(f"the database URL has port 0; {DATABASE_URL_FIX}")

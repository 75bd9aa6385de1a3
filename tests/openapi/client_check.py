"""A client generated from /openapi.json works against the running server.

Run by tests/openapi/run: `client` is the package openapi-python-client
generated from the server's document (on PYTHONPATH); argv: base URL, CSRF token.
It lists the characters, creates one and sees it listed, saves a setting and reads
it back, and reads the jukebox configuration.
"""

import importlib
import sys

from client import Client
from client.api.characters import characters_create, characters_list
from client.models.profile import Profile


def check(cond, what):
    if not cond:
        print(f"client check failed: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"   ok: {what}")


def main():
    base, token = sys.argv[1], sys.argv[2]
    c = Client(base_url=base, headers={"X-CSRF-Token": token}, raise_on_unexpected_status=True)

    listed = characters_list.sync_detailed(client=c)
    check(listed.status_code == 200 and listed.parsed is not None, "characters_list parses")
    names = [p.name for p in listed.parsed.characters]
    check(listed.parsed.current in names, f"the current character is listed ({names})")

    body = Profile(name="ClientCheck")
    body["voice"] = "soft"
    created = characters_create.sync_detailed(client=c, body=body)
    check(created.status_code == 200 and created.parsed.name == "ClientCheck", "characters_create")
    again = characters_list.sync(client=c)
    saved = [p for p in again.characters if p.name == "ClientCheck"]
    check(saved and saved[0]["voice"] == "soft", "the created character and its open field are listed")

    save_setting(c)
    read_jukebox(c)


def save_setting(c):
    """Save a setting through a typed config operation and read it back."""
    prefs = importlib.import_module("client.api.config.config_save_preference")
    get_prefs = importlib.import_module("client.api.config.config_preferences")
    pref_model = importlib.import_module("client.models.model_preference").ModelPreference
    vector = importlib.import_module("client.models.vector").Vector
    body = pref_model(
        model_path="/static/models/client-check/model.json",
        position=vector(x=1.0, y=2.0),
        scale=vector(x=1.0, y=1.0),
    )
    saved = prefs.sync_detailed(client=c, body=body)
    check(saved.status_code == 200, "config_save_preference")
    listed = get_prefs.sync(client=c)
    check(
        any(p.model_path == "/static/models/client-check/model.json" for p in listed),
        "the saved preference is read back",
    )


def read_jukebox(c):
    """Read the jukebox configuration."""
    config = importlib.import_module("client.api.jukebox.jukebox_get_config")
    r = config.sync_detailed(client=c)
    check(r.status_code == 200 and r.parsed is not None, "jukebox_get_config parses")


if __name__ == "__main__":
    main()

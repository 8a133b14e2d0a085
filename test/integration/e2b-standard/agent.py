"""An agent as E2B's docs set one up: the Python SDK given only E2B_DOMAIN and E2B_API_KEY (and
the CA its HTTPS certificates come from). Prints what it saw as one JSON line."""
import json
import time
import urllib.request

from e2b import Sandbox

sbx = Sandbox.create("base")
seen = {"id": sbx.sandbox_id}
seen["echo"] = sbx.commands.run("echo standard").stdout
sbx.files.write("/home/user/note.txt", "kept")
seen["read"] = sbx.files.read("/home/user/note.txt")
sbx.commands.run(
    "cd /home/user && python3 -m http.server 8000 >/dev/null 2>&1", background=True
)
seen["host"] = sbx.get_host(8000)
for _ in range(50):
    try:
        with urllib.request.urlopen(f"https://{seen['host']}/note.txt") as r:
            seen["served"] = r.read().decode()
            break
    except OSError:
        time.sleep(0.2)
with urllib.request.urlopen(sbx.download_url("/home/user/note.txt")) as r:
    seen["downloaded"] = r.read().decode()
seen["killed"] = sbx.kill()
print(json.dumps(seen))

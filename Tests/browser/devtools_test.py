"""The devtools page in a real browser: Debian's Chromium, driven by Playwright (pinned in requirements.txt).

Starts the built `luastore run Tests/browser/app --devtools 0 --persist FILE` with its actions coming from a pipe
this test writes, opens the address it prints, and checks what a user sees: actions arriving live, the database's
size and last commit, an old action's diff
and state, dispatch from the page once unlocked, jump and resume, a failure, the first entry where a condition
holds, which plugin changed what and each plugin's cost, after the scripts change on disk (`--watch`) the session replayed with them and its first divergence,
and an export downloaded from the page and imported back. Saves a screenshot (README shows it).

Usage: python3 Tests/browser/devtools_test.py BINARY SCREENSHOT
Exit status 0 when every check passed; every wait is bounded.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import sys
import threading
import time

from playwright.sync_api import expect, sync_playwright

BINARY, SCREENSHOT = sys.argv[1], sys.argv[2]
TIMEOUT_MS = 20_000


APP = os.path.join(tempfile.mkdtemp(prefix="luastore-devtools-"), "app")
shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "app"), APP)


def start_app():
    process = subprocess.Popen(
        [BINARY, "run", APP, "--actions", "-", "--format", "json", "--devtools", "0", "--watch",
         "--persist", os.path.join(os.path.dirname(APP), "store.db")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = {}

    def read_errors():
        for line in process.stderr:
            match = re.match(r"devtools: (http://\S+)", line)
            if match and "url" not in found:
                found["url"] = match.group(1)
    threading.Thread(target=read_errors, daemon=True).start()
    deadline = time.time() + 30
    while "url" not in found:
        if time.time() > deadline or process.poll() is not None:
            raise SystemExit("luastore did not print its devtools address")
        time.sleep(0.05)
    return process, found["url"]


def send(process, action):
    process.stdin.write(json.dumps(action) + "\n")
    process.stdin.flush()


def main():
    expect.set_options(timeout=TIMEOUT_MS)
    process, url = start_app()
    try:
        for title in ["Buy milk", "Walk the dog", "Write the report"]:
            send(process, {"type": "add", "title": title})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                  args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.set_default_timeout(TIMEOUT_MS)
            failures = []
            page.on("pageerror", lambda error: failures.append(str(error)))
            page.goto(url)

            # Actions arrive live: the three sent before, then one sent while the page is open.
            rows = page.locator("#timeline .row")
            expect(rows).to_have_count(3)
            # The layout: the timeline takes the height between the header and the footer.
            timeline = page.locator("#timeline").bounding_box()
            footer = page.locator("footer").bounding_box()
            if timeline["height"] < 400 or footer["y"] + footer["height"] < 740:
                raise SystemExit("the layout is broken: timeline %r, footer %r" % (timeline, footer))
            send(process, {"type": "toggle", "id": 2})
            expect(rows).to_have_count(4)
            expect(page.locator("#status")).to_contain_text("live · 4 entries")
            # The store's database: its size and last commit (read every 2 s).
            expect(page.locator("#persistence")).to_contain_text("saved through #4")
            expect(page.locator("#persistence")).to_have_attribute("title", re.compile("store.db \\(batch sync\\); last commit at "))
            expect(page.locator("#persistence")).to_contain_text("KiB")

            # An old action: its diff (path, before, after) and the state at that point.
            page.locator('#timeline .row[data-seq="2"]').click()
            expect(page.locator("#action")).to_contain_text('"Walk the dog"')
            expect(page.locator("#diff")).to_contain_text("state.todos[2]")
            # Which plugin changed what (the app mounts `stats` at state.stats), and each plugin's cost.
            expect(page.locator("#diff tr", has_text="state.todos[2]")).to_contain_text("app")
            expect(page.locator("#diff tr", has_text="state.stats.seen")).to_contain_text("plugin stats")
            expect(page.locator("#plugins")).to_contain_text("stats 1.0.0: ")
            expect(page.locator("#plugins")).to_contain_text(" calls · ")
            expect(page.locator("#state-tree")).to_contain_text("todos")
            page.locator("#state-tree .key", has_text="todos").click()
            expect(page.locator("#state-tree")).to_contain_text("{3}")  # (the todos table: 2 todos… and its fields)
            expect(page.locator("#props")).to_contain_text("Walk the dog")
            expect(page.locator("#props")).not_to_contain_text("Write the report")

            # The keyboard: ↓ from entry 2 selects entry 3 (its action shown), ↑ goes back.
            page.locator("#timeline").press("ArrowDown")
            expect(page.locator("#timeline .row.selected")).to_have_attribute("data-seq", "3")
            expect(page.locator("#action")).to_contain_text('"Write the report"')
            page.locator("#timeline").press("ArrowUp")
            expect(page.locator("#timeline .row.selected")).to_have_attribute("data-seq", "2")

            # Dispatch from the page, once unlocked.
            expect(page.locator("#dispatch-button")).to_be_disabled()
            page.locator("#lock").click()
            expect(page.locator("#dispatch-button")).to_be_enabled()
            page.locator("#dispatch-text").fill(json.dumps({"type": "add", "title": "From the page"}))
            page.locator("#dispatch-button").click()
            expect(rows.filter(has_text="add")).to_have_count(4)
            expect(page.locator("#status")).to_contain_text("5 entries")

            # Jump back, see the app's props there, hold a live action, resume.
            page.locator('#timeline .row[data-seq="1"]').click()
            page.locator("#jump").click()
            expect(page.locator("#status")).to_contain_text("time travel: showing #1")
            send(process, {"type": "add", "title": "Held while traveling"})
            expect(page.locator("#status")).to_contain_text("1 action(s) held")
            page.locator("#resume").click()
            expect(page.locator("#status")).to_contain_text("live · 6 entries")
            page.locator('#timeline .row[data-seq="6"]').click()
            expect(page.locator("#action")).to_contain_text("Held while traveling")

            # A failing action is marked, with its message and line.
            send(process, {"type": "rename", "id": 99})
            failed = page.locator("#timeline .row.failed")
            expect(failed).to_have_count(1)
            failed.click()
            expect(page.locator("#failure")).to_contain_text("failed")

            # The first entry after which a condition on the state holds.
            page.locator("#first-where").fill("#state.todos >= 4")
            page.locator("#first-where").press("Enter")
            expect(page.locator("#message")).to_contain_text("first holds after #5")
            expect(page.locator("#timeline .row.selected")).to_have_attribute("data-seq", "5")

            # A reload, then the session replayed with the new scripts: the first action they change is shown.
            path = os.path.join(APP, "app.lua")
            with open(path) as file:
                source = file.read()
            with open(path + ".new", "w") as file:
                file.write(source.replace("state.nextId = state.nextId + 1", "state.nextId = state.nextId + 10"))
            os.replace(path + ".new", path)
            expect(page.locator("#timeline .row.reload")).to_have_count(1)
            expect(page.locator("#replay")).to_have_class(re.compile("attention"))
            page.locator("#replay").click()
            expect(page.locator("#replay-summary")).to_contain_text("diverge at action #1 (changes)")
            expect(page.locator("#replay-result")).to_contain_text("state.nextId")
            expect(page.locator("#timeline .row.diverged")).to_have_count(1)
            expect(page.locator("#diff")).to_be_visible()
            page.screenshot(path=SCREENSHOT)

            # Export the session as a spec from the page: one test per kept action.
            with page.expect_download() as spec_download:
                page.locator("#export-spec").click()
            assert spec_download.value.suggested_filename.endswith("_session_spec.lua"), spec_download.value.suggested_filename
            with open(spec_download.value.path(), encoding="utf-8") as spec_file:
                spec_text = spec_file.read()
            assert 'local session = require("luastore.session")' in spec_text, spec_text[:500]
            assert "session.step(app, state, 2, " in spec_text, spec_text[:2000]

            # Export the session from the page, import the file back: browsed like the running app.
            with page.expect_download() as download:
                page.locator("#export").click()
            exported = download.value.path()
            page.locator("#import-file").set_input_files(exported)
            expect(page.locator("#imported-summary")).to_contain_text("Browsing the recording")
            expect(page.locator("#status")).to_contain_text("recording · ")
            page.locator('#timeline .row[data-seq="2"]').click()
            expect(page.locator("#action")).to_contain_text('"Walk the dog"')
            page.locator("#back").click()
            expect(page.locator("#imported")).to_be_hidden()
            expect(page.locator("#status")).to_contain_text("live · ")

            if failures:
                raise SystemExit("the page raised: " + "; ".join(failures))
            browser.close()
        print("devtools browser test: every check passed; screenshot at " + SCREENSHOT)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    main()

"""The sample page of `luastore serve` in a real browser: Debian's Chromium, driven by Playwright.

Serves samples/counter (its web/index.html) with bearer tokens and `--persist-sync full`, opens the page on one key in
two tabs and checks what two users see: a click in one tab shows in both; the server killed with `kill -9` and
started again on the same port, both tabs reconnect by themselves (with `?since=`) and show the count it had — nothing
acknowledged lost — and clicks go on; another key is another count; a page without a token says why it is closed.

Usage: python3 Tests/browser/shared_counter_test.py BINARY SCREENSHOT
(BINARY: the built `luastore`, with `luastore-serve` beside it.) Exit status 0 when every check passed; every wait
is bounded.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import expect, sync_playwright

BINARY, SCREENSHOT = sys.argv[1], sys.argv[2]
TIMEOUT_MS = 20_000
COUNTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples", "counter")
FOLDER = tempfile.mkdtemp(prefix="luastore-shared-counter-")
SECRET = os.path.join(FOLDER, "secret")


def luastore(*arguments):
    done = subprocess.run([BINARY, *arguments], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit("luastore %s: %s" % (" ".join(arguments), done.stderr))
    return done.stdout.strip()


def serve(listen):
    """Starts the server; answers the process and the address it printed (read within 60 s)."""
    errors = open(os.path.join(FOLDER, "serve-errors.txt"), "a")
    process = subprocess.Popen(
        [BINARY, "serve", COUNTER, "--listen", listen, "--data", os.path.join(FOLDER, "data"),
         "--token-secret", SECRET, "--persist-sync", "full"],
        stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = process.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            return process, match.group(1)
        if process.poll() is not None:
            break
    process.kill()
    raise SystemExit("luastore serve did not print its address; its errors: " + open(errors.name).read())


def main():
    expect.set_options(timeout=TIMEOUT_MS)
    luastore("token", "secret", SECRET)
    token = luastore("token", "issue", "--secret", SECRET, "--subject", "tester", "--key", "room-*")
    process, url = serve("127.0.0.1:0")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                  args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 640, "height": 560})
            failures = []
            tabs = [context.new_page(), context.new_page()]
            for tab in tabs:
                tab.set_default_timeout(TIMEOUT_MS)
                tab.on("pageerror", lambda error: failures.append(str(error)))
                tab.goto("%s/?key=room-1&token=%s" % (url, token))
            first, second = tabs

            # Both tabs show the key's count, live.
            def both_show(count, status="connected"):
                for tab in tabs:
                    expect(tab.locator("#status")).to_have_text(status)
                    expect(tab.locator("#count")).to_have_text(count)
                    expect(tab.locator("#label")).to_have_text("1 click" if count == "1" else count + " clicks")

            both_show("0")
            for _ in range(3):
                first.locator("#increment").click()
            both_show("3")
            second.locator("#decrement").click()
            both_show("2")

            # The server dies (kill -9) and comes back on the same port: both tabs reconnect by themselves and show
            # the count every acknowledged click made.
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            for tab in tabs:
                expect(tab.locator("#status")).to_contain_text("reconnecting")
            process, _ = serve(url.replace("http://", ""))
            both_show("2")
            second.locator("#increment").click()
            both_show("3")
            first.screenshot(path=SCREENSHOT)

            # Another key is another count; a page without a token is told why it is closed, and does not retry.
            other = context.new_page()
            other.goto("%s/?key=room-2&token=%s" % (url, token))
            expect(other.locator("#count")).to_have_text("0")
            other.locator("#increment").click()
            expect(other.locator("#count")).to_have_text("1")
            expect(first.locator("#count")).to_have_text("3")
            stranger = context.new_page()
            stranger.goto("%s/?key=room-1" % url)
            expect(stranger.locator("#status")).to_contain_text("closed: a bearer token is needed")
            expect(stranger.locator("#increment")).to_be_disabled()

            if failures:
                raise SystemExit("the page raised: %s" % failures)
            browser.close()
        # What the tabs showed is what the store holds.
        request = urllib.request.Request(url + "/stores/room-1/props", headers={"Authorization": "Bearer " + token})
        props = json.loads(urllib.request.urlopen(request, timeout=30).read())
        if props.get("count") != 3:
            raise SystemExit("the store's props are %r, not a count of 3" % props)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    print("shared counter: every check passed")


if __name__ == "__main__":
    main()

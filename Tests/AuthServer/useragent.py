#!/usr/bin/env python3
"""A scripted browser for TokenStore's sign-in tests (stdlib only), usable as $BROWSER.

    useragent.py URL                     e.g. BROWSER=Tests/AuthServer/useragent.py xdg-open URL

It GETs URL, follows redirects, submits the first form of each page that has one (the
emulated Apple form_post page, or the login page's "Continue with Apple" button) as a
browser would, and stops at the first page without a form: normally the app's loopback
callback (http://127.0.0.1:PORT/callback?code=...&state=...), which it has then GET.

It only ever contacts 127.0.0.1, localhost or ::1 (it connects to the IP literal itself and
never resolves a name or uses a proxy); any other host, in the first URL, a Location or a
form action, is refused before anything is sent to it.

Exit status: 0 the navigation ended at a page (the callback, or a page with nothing to
follow, e.g. an error page: like a real browser, that is not a failure of the browser);
1 a usage or transport error (connection refused, timeout, more than 20 hops);
2 a URL was refused because its host is not loopback.

Environment:
  TOKENSTORE_USERAGENT_LOG=FILE  append one line a request ("GET http://127.0.0.1:P/path 302",
                                 never a query string) and a closing "END ..." line
  TOKENSTORE_USERAGENT_DETACH=1  check the URL, then carry on in a detached child and exit 0
                                 at once, as xdg-open does after starting a GUI browser
  TOKENSTORE_USERAGENT_TIMEOUT=S per-request timeout in seconds (default 10)
  TOKENSTORE_USERAGENT_COOKIES=FILE  keep cookies in FILE (JSON, made 0600) across runs, as a
                                 browser profile does: read at the start, written after each
                                 answer that sets or clears one. Cookies are kept per host and
                                 port, sent to that host and port only; Max-Age=0 or an Expires
                                 in the past clears one. Without it, no cookie is kept.
"""

from __future__ import annotations

import email.utils
import html.parser
import http.client
import json
import os
import sys
import time
import urllib.parse

LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
MAX_HOPS = 20
REDIRECTS = {301, 302, 303, 307, 308}


class Refused(Exception):
    pass


class Failed(Exception):
    pass


def log(line):
    sys.stderr.write(f"useragent: {line}\n")
    sys.stderr.flush()
    path = os.environ.get("TOKENSTORE_USERAGENT_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def without_query(url):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def check(url):
    """(ip to connect to, port, Host header, path+query) of an allowed URL, or Refused."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise Refused(f"malformed URL ({e})") from None
    host = (parts.hostname or "").lower()
    if host not in LOOPBACK:
        raise Refused(f"host {host or '(none)'!r} is not loopback (127.0.0.1, localhost, ::1)")
    if parts.scheme != "http":
        raise Refused(f"scheme {parts.scheme!r}: only http to loopback is supported")
    port = port or 80
    netloc_host = f"[{host}]" if ":" in host else host
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return LOOPBACK[host], port, f"{netloc_host}:{port}", path


class Forms(html.parser.HTMLParser):
    """The forms of a page: action, method, and the fields a submission sends."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms = []
        self._current = None

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "form":
            self._current = {"action": a.get("action", ""), "method": a.get("method", "get").lower(),
                             "fields": [], "button": None}
            self.forms.append(self._current)
            return
        form = self._current
        if form is None or "name" not in a and tag != "button":
            return
        kind = a.get("type", "submit" if tag == "button" else "text").lower()
        if tag == "input" and kind in ("hidden", "text", "email", "password", "search", "tel", "url"):
            form["fields"].append((a["name"], a.get("value", "")))
        elif tag == "input" and kind in ("checkbox", "radio") and "checked" in a:
            form["fields"].append((a["name"], a.get("value", "on")))
        elif kind == "submit" and tag in ("input", "button") and form["button"] is None:
            form["button"] = (a["name"], a.get("value", "")) if a.get("name") else ("", "")

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None


class CookieJar:
    """Cookies per "host:port", in TOKENSTORE_USERAGENT_COOKIES (none kept without it)."""

    def __init__(self, path):
        self.path = path
        self.cookies = {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.cookies = json.load(f)

    def header(self, origin):
        jar = self.cookies.get(origin) or {}
        return "; ".join(f"{name}={value}" for name, value in sorted(jar.items())) or None

    def take(self, origin, set_cookies):
        if not self.path or not set_cookies:
            return
        jar = self.cookies.setdefault(origin, {})
        for line in set_cookies:
            first, *attributes = [part.strip() for part in line.split(";")]
            name, _, value = first.partition("=")
            expired = False
            for attribute in attributes:
                key, _, text = attribute.partition("=")
                if key.lower() == "max-age" and text.strip().lstrip("-").isdigit() and int(text) <= 0:
                    expired = True
                elif key.lower() == "expires":
                    try:
                        expired = email.utils.parsedate_to_datetime(text).timestamp() <= time.time()
                    except (TypeError, ValueError):
                        pass
            if expired:
                jar.pop(name, None)
            else:
                jar[name] = value
        fd = os.open(self.path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.cookies, f)
        os.replace(self.path + ".tmp", self.path)


JAR = CookieJar(None)


def request(method, url, body=None, timeout=10.0):
    ip, port, host_header, path = check(url)
    headers = {"Host": host_header, "User-Agent": "TokenStoreTestUserAgent/1",
               "Accept": "text/html,*/*"}
    if body is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    origin = f"{ip}:{port}"
    cookie = JAR.header(origin)
    if cookie:
        headers["Cookie"] = cookie
    conn = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        JAR.take(origin, resp.msg.get_all("Set-Cookie"))
        return resp.status, resp.getheader("Location"), resp.getheader("Content-Type") or "", data
    except (OSError, http.client.HTTPException) as e:
        raise Failed(f"{method} {without_query(url)}: {type(e).__name__}: {e}") from None
    finally:
        conn.close()


def browse(url, timeout):
    method, body = "GET", None
    for _ in range(MAX_HOPS):
        status, location, ctype, data = request(method, url, body, timeout)
        log(f"{method} {without_query(url)} {status}")
        if status in REDIRECTS and location:
            url = urllib.parse.urljoin(url, location)
            check(url)  # refuse before anything is sent there
            if status in (301, 302, 303):
                method, body = "GET", None
            continue
        forms = Forms()
        if "html" in ctype.lower():
            forms.feed(data.decode("utf-8", "replace"))
        if not forms.forms:
            return status, url
        form = forms.forms[0]
        target = urllib.parse.urljoin(url, form["action"] or url)
        check(target)
        fields = list(form["fields"])
        if form["button"] and form["button"][0]:
            fields.append(form["button"])
        encoded = urllib.parse.urlencode(fields)
        if form["method"] == "post":
            url, method, body = target, "POST", encoded.encode()
        else:
            parts = urllib.parse.urlsplit(target)
            url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, encoded, ""))
            method, body = "GET", None
    raise Failed(f"more than {MAX_HOPS} hops")


def detach():
    """Double fork: the caller gets exit 0 at once, the grandchild browses on."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write("usage: useragent.py URL\n")
        return 1
    url = argv[1]
    global JAR
    JAR = CookieJar(os.environ.get("TOKENSTORE_USERAGENT_COOKIES") or None)
    try:
        timeout = float(os.environ.get("TOKENSTORE_USERAGENT_TIMEOUT") or 10)
    except ValueError:
        timeout = 10.0
    try:
        check(url)
    except Refused as e:
        log(f"REFUSED {e}")
        log("END refused")
        return 2
    if os.environ.get("TOKENSTORE_USERAGENT_DETACH") == "1":
        detach()
    try:
        status, last = browse(url, timeout)
    except Refused as e:
        log(f"REFUSED {e}")
        log("END refused")
        return 2
    except Failed as e:
        log(f"ERROR {e}")
        log("END error")
        return 1
    log(f"END {status} {without_query(last)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

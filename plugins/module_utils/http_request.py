# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One HTTP call with ansible's open_url, as (status, body, error); never raises for HTTP."""

from __future__ import absolute_import, division, print_function

import json
import socket
from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url

__metaclass__ = type

# Bodies above this are cut: nothing these modules read is that large.
MAX_BODY = 4 * 1024 * 1024


class Response(object):
    def __init__(self, status, body, error=None):
        self.status = status  # None when no response arrived
        self.body = body  # bytes
        self.error = error  # text when no response arrived

    def json(self):
        """The decoded JSON body, or raise ValueError naming what was wrong."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ValueError("the response is not JSON: %r" % self.body[:80]) from None

    def error_text(self):
        """The service's {"error": "..."} message, or the start of the body."""
        try:
            data = self.json()
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("error"), str):
            return data["error"]
        text = self.body[:200].decode("utf-8", "replace").strip()
        return text or "no details"


def request(
    method,
    url,
    data=None,
    headers=None,
    timeout=10,
    validate_certs=True,
    ca_path=None,
    opener=None,
):
    """Make one call. HTTP errors are responses; a refused or timed-out call is an error."""
    opener = opener or open_url
    body = None
    headers = dict(headers or {})
    if data is not None:
        body = json.dumps(data).encode("utf-8")
        headers["Content-Type"] = "application/json"
    try:
        resp = opener(
            url,
            data=body,
            method=method,
            headers=headers,
            timeout=timeout,
            validate_certs=validate_certs,
            ca_path=ca_path,
            follow_redirects="safe",
        )
        return Response(resp.getcode(), resp.read(MAX_BODY))
    except HTTPError as exc:
        try:
            content = exc.read(MAX_BODY)
        except Exception:  # pylint: disable=broad-except
            # The body only adds detail to the message; its absence is no error.
            content = b""
        return Response(exc.code, content or b"")
    except URLError as exc:
        return Response(None, b"", "cannot connect to %s: %s" % (url, exc.reason))
    except (socket.timeout, TimeoutError):
        return Response(None, b"", "no response from %s within %ss" % (url, timeout))
    except (OSError, ValueError) as exc:
        return Response(None, b"", "cannot connect to %s: %s" % (url, exc))

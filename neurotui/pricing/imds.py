"""Which EC2 instance are we on? A minimal IMDSv2 client (urllib only).

Off EC2 (a laptop, CI, the project's own machines) this must cost at most about one timeout
and say nothing: every failure returns None, nothing is raised or printed. Like botocore it
makes one attempt with a 1 s timeout, honours AWS_EC2_METADATA_DISABLED=true, and takes its
endpoint from AWS_EC2_METADATA_SERVICE_ENDPOINT when set. Proxies are never used: the metadata
service is link-local and a proxy would answer for the wrong host.
"""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

IMDS_BASE_URL = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
INSTANCE_TYPE_PATH = "/latest/meta-data/instance-type"
REGION_PATH = "/latest/meta-data/placement/region"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
DEFAULT_TIMEOUT_S = 1.0
DEFAULT_TOKEN_TTL_S = 60
_MAX_BODY = 4096
_TYPE_RE = re.compile(r"^[a-z0-9][a-z0-9-]*\.[a-z0-9-]+$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")


@dataclass(frozen=True)
class InstanceIdentity:
    """What IMDS told us; region is None if that one request failed."""

    instance_type: str
    region: str | None
    source: str = "imds"


def imds_disabled(env: Mapping[str, str] | None = None) -> bool:
    """True when the user turned metadata lookups off (AWS_EC2_METADATA_DISABLED=true)."""
    env = os.environ if env is None else env
    return env.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() == "true"


def detect_instance(
    base_url: str | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    token_ttl_s: int = DEFAULT_TOKEN_TTL_S,
    env: Mapping[str, str] | None = None,
) -> InstanceIdentity | None:
    """Instance type and region from IMDSv2, or None when not on EC2 (never raises/prints).

    `base_url` defaults to $AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254.
    Each of the (at most three) requests gets `timeout_s` and one attempt.
    """
    env = os.environ if env is None else env
    if imds_disabled(env):
        return None
    base = (base_url or env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or IMDS_BASE_URL)
    base = base.rstrip("/")
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        token = _request(opener, "PUT", base + TOKEN_PATH,
                         {TOKEN_TTL_HEADER: str(int(token_ttl_s))}, timeout_s)
        if not token:
            return None
        headers = {TOKEN_HEADER: token}
        instance_type = _request(opener, "GET", base + INSTANCE_TYPE_PATH, headers, timeout_s)
        if instance_type is None or not _TYPE_RE.match(instance_type):
            return None
        region = _request(opener, "GET", base + REGION_PATH, headers, timeout_s)
        if region is not None and not _REGION_RE.match(region):
            region = None
        return InstanceIdentity(instance_type, region)
    except Exception:  # never let a metadata lookup break the caller
        return None


def _request(opener: urllib.request.OpenerDirector, method: str, url: str,
             headers: dict[str, str], timeout_s: float) -> str | None:
    """The stripped body of a 200 answer, else None (any error, any other status)."""
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=b"" if method == "PUT" else None)
    try:
        with opener.open(request, timeout=timeout_s) as response:
            if response.status != 200:
                return None
            body = response.read(_MAX_BODY).decode("ascii", "replace").strip()
    except Exception:
        return None
    return body or None

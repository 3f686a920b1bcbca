"""Owner references worth following: checked as the API server checks the objects they name.

A pod's ``ownerReferences`` and its owner labels are written by whoever creates the pod, and
the API server checks only that a reference's fields are not empty. The operator follows owners
with a GET each, so an owner's name, kind and API version are parts of a request that someone
else chose: ``../../../../api/v1/nodes?limit=0`` made it list every Node of the cluster, and
``../../namespaces/victim/pods/victim-pod`` read a pod of a namespace the pod's creator cannot
read (reliability round 3, S3). No object an API server stores can be named so, so a reference
that names one is not followed: the pod is reported by its nearest valid owner, or as itself.

The rules are the API server's own for the objects a reference can name:
- a name is a DNS-1123 subdomain of at most 253 characters (custom resources, Jobs, JobSets,
  ReplicaSets and claims are all named so);
- a kind is what a CustomResourceDefinition may declare: its lower case is a DNS-1035 label
  (a letter, then letters, digits or '-', at most 63), which every built-in kind also is;
- an API version is ``version`` (the core group) or ``group/version``, the group a DNS-1123
  subdomain and the version a DNS-1035 label, as a CRD's group and versions must be.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fabriccap.core.names import is_dns_subdomain
from fabriccap.core.text import MAX_KIND, clean_text

_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_VERSION_LENGTH = 63

# Why a reference is not followed: what the log says, once each.
INVALID_NAME = "its name is not a DNS-1123 subdomain of at most 253 characters"
INVALID_KIND = "its kind is not a Kubernetes kind (a letter, then letters, digits or '-'; at most 63)"
INVALID_API_VERSION = "its apiVersion is not 'version' or 'group/version' (a DNS subdomain and a DNS label)"
# How much of a refused reference a log line shows: enough to find the pod's creator's intent.
SHOWN_LENGTH = 80


def is_object_name(text: str) -> bool:
    return is_dns_subdomain(text)


def is_kind(text: str) -> bool:
    return len(text) <= MAX_KIND and _DNS_1035_LABEL.fullmatch(text.lower()) is not None


def is_api_version(text: str) -> bool:
    """``""`` (the lookup's default version), ``v1``, or ``group/version``."""
    if not text:
        return True
    group, slash, version = text.rpartition("/")
    if slash and not is_dns_subdomain(group):
        return False
    return len(version) <= MAX_VERSION_LENGTH and _DNS_1035_LABEL.fullmatch(version) is not None


def reference_problem(api_version: str, kind: str, name: str) -> str | None:
    """Why a reference to (api_version, kind, name) must not be followed; None: it may be."""
    if not is_object_name(name):
        return INVALID_NAME
    if not is_kind(kind):
        return INVALID_KIND
    if not is_api_version(api_version):
        return INVALID_API_VERSION
    return None


@dataclass(frozen=True, slots=True)
class RefusedReference:
    """A reference not followed, and where it was found."""

    cause: str  # one of the INVALID_* sentences
    holder: str  # "Pod ml/p", "Job ml/j": the object whose reference it is
    reference: str  # the reference as written, cleaned and shortened for a log line

    def describe(self) -> str:
        return (
            f"{self.holder}: owner {self.reference} not followed: {self.cause}; the workload is reported by its"
            " nearest valid owner (further references refused for this reason are not logged)"
        )


def shown_reference(api_version: object, kind: object, name: object) -> str:
    return clean_text(f"{kind} {name} ({api_version})", SHOWN_LENGTH)


RefusalHook = Callable[[RefusedReference], None]


class OncePerCause:
    """A refusal hook that says each cause once (through ``say``, the caller's log): a pod's
    creator can make thousands of such pods, and a line each would flood the log."""

    def __init__(self, say: Callable[[str], object]) -> None:
        self.say = say
        self.causes: set[str] = set()

    def __call__(self, refused: RefusedReference) -> None:
        if refused.cause not in self.causes:
            self.causes.add(refused.cause)
            self.say(refused.describe())

"""Talking to a Kubernetes API server: the official client, a timeout on every call, its errors in the console's words.

``connect`` reads the kubeconfig of ``KUBECONFIG`` (or, inside a cluster, the pod's ServiceAccount). Lists are read
page by page as plain JSON (``list_all``): the client's typed objects cost about a millisecond a pod to build, and a
cluster has tens of thousands.

Errors: ``KubernetesUnavailable`` — no answer (refused, a timeout, a 5xx): the round is skipped, nothing written.
``KubernetesRefused`` — the server said no; a 403 names the verb and the resource RBAC refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from scheduler.backends import ClusterUnavailable

PAGE = 2_000  # objects a list call returns at once
MAX_BODY = 256 * 1024 * 1024  # a page larger than this is refused, not parsed


class KubernetesError(ClusterUnavailable):
    """Something about Kubernetes went wrong; the message is safe to show and store."""


class KubernetesUnavailable(KubernetesError):
    """The API server did not answer."""


class KubernetesRefused(KubernetesError):
    """The API server answered no; ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Kube:
    """One connection's APIs and its timeout."""

    api: k8s.ApiClient
    timeout: float

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    @property
    def batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self.api)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    def call(self, verb: str, resource: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` with the timeout, its errors as ``KubernetesError`` naming ``verb`` and
        ``resource``."""
        try:
            return method(*args, _request_timeout=self.timeout, **kwargs)
        except ApiException as error:
            raise refusal(error, verb, resource) from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise KubernetesUnavailable(f"Kubernetes API: no answer to {verb} {resource} "
                                        f"({type(error).__name__})") from None

    def list_all(self, verb: str, resource: str, method: Callable[..., Any], *args: Any,
                 **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every object of a list call, page by page, as plain JSON; a page that expired (410) starts over."""
        token = ""
        while True:
            response = self.call(verb, resource, method, *args, limit=PAGE, _continue=token or None,
                                 _preload_content=False, **kwargs)
            body = response.data
            if len(body) > MAX_BODY:
                raise KubernetesRefused(f"Kubernetes API: a page of {resource} of {len(body)} bytes is too large")
            try:
                page = json.loads(body)
            except ValueError:
                raise KubernetesRefused(f"Kubernetes API: {verb} {resource} answered with something not JSON") from None
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return


def refusal(error: ApiException, verb: str, resource: str) -> KubernetesError:
    status = error.status or 0
    if status == 0 or status >= 500:
        return KubernetesUnavailable(f"Kubernetes API: {verb} {resource} failed (HTTP {status or 'none'})")
    if status == 403:
        return KubernetesRefused(f"Kubernetes forbids the console to {verb} {resource} (RBAC): grant it in the "
                                 "console's ClusterRole", 403)
    return KubernetesRefused(f"Kubernetes API: {verb} {resource}: {_message(error)} (HTTP {status})", status)


def _message(error: ApiException) -> str:
    """The API's own words of a refusal — a ``Status``'s causes (field: why), else its message — bounded; never the
    raw body."""
    try:
        status = json.loads(error.body or "{}")
        causes = [f"{cause.get('field') or ''}: {cause.get('message') or ''}".strip(": ")
                  for cause in (status.get("details") or {}).get("causes") or [] if isinstance(cause, dict)]
        message = "; ".join(cause[:200] for cause in causes) or status.get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or error.reason or "refused")[:400]


def connect(kubeconfig: str | None = None) -> Kube:
    """A connection to the cluster of ``kubeconfig``, by default the settings' ``KUBECONFIG``; without one, the pod's
    own ServiceAccount."""
    configuration = k8s.Configuration()
    kubeconfig = settings.KUBECONFIG if kubeconfig is None else kubeconfig
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)
    except (ConfigException, OSError, ValueError, TypeError) as error:
        where = f"KUBECONFIG={kubeconfig}" if kubeconfig else "the pod's ServiceAccount"
        raise KubernetesUnavailable(f"Kubernetes: no usable configuration from {where} "
                                    f"({type(error).__name__})") from None
    configuration.retries = 1
    return Kube(k8s.ApiClient(configuration), float(settings.KUBERNETES_TIMEOUT_SECONDS))

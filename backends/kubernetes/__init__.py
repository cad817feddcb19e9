"""The Kubernetes backend (``CLUSTER_BACKEND=kubernetes``): tasks as pods; see ``backend``."""

from backends.kubernetes.backend import KubernetesBackend

__all__ = ["KubernetesBackend"]

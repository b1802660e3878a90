"""Atoll on Kubernetes/Karmada: controller, caches and admission webhook."""

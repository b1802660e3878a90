"""The embedded fleet simulator: the same Engine and policies as the controller, on a simulated Karmada fleet."""

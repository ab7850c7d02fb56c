"""Relating TSC domains (machines) with MinRTT probes, and translating TSC values and durations into a
reference domain with strict error bounds (the Cloudprofiler paper, section 3)."""
from .translate import Anchor, Calibration, Duration, Probes, anchor_from_probes, durations, to_reference

__all__ = ["Anchor", "Calibration", "Duration", "Probes", "anchor_from_probes", "durations", "to_reference"]

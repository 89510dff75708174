"""GPU telemetry: collectors (NVML or simulated), samples and rollups, power, export."""

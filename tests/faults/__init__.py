"""The fault-injection suite (issue 12): `make faults` runs it all at full size."""

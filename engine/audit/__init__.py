"""The audit trail of exports and downloads (issue 25): `engine.audit.log`."""

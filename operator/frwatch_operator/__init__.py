"""frwatch operator: opt-in, Flight Recorder injection, dump capture, the verdict loop, remediation."""

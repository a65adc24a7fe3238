"""Host side of the stages: each turns inputs into a StageResult (a kernel's failure is data)."""

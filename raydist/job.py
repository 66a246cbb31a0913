"""Former home of the plan phase, now ``raydist.driver.plan``; its names stay importable here."""

from raydist.driver.plan import GatePlan, Job, JobError, ServedModel, plan_job

__all__ = ["GatePlan", "Job", "JobError", "ServedModel", "plan_job"]

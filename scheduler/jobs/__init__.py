"""The job queue's verbs: ``verbs`` (submit, cancel, requeue, change priority and bounds, each in one transaction of
its own) and ``intake`` (what arrives from outside: submissions that survive retries, workers' reports), with one
contract — validate first, raise ``ValidationError`` naming the field, write in one transaction."""

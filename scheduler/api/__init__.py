"""The REST API under ``/api/``: jobs for people and programs (token or session), reports for workers."""

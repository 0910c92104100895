"""Shared helpers that are not API: token checks, scanner acknowledgments, validation rules."""

"""Targets a refresh moves to a new model version: HyperPod operator objects and SageMaker endpoints."""

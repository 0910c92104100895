"""The Hub token sync: copies Hugging Face Hub tokens from Secrets Manager into the Kubernetes Secrets the
HyperPod inference operator hands to its download init containers (see README.md)."""

"""Odin: provisions the platform's environments. Terraform declares the hosts, its outputs become the
Ansible inventory, Ansible roles install/configure/start the services, health checks close the loop."""

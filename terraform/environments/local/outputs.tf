output "environment" {
  description = "Name of this environment."
  value       = "local"
}

output "nodes" {
  description = "Every node keyed by name: role, host, ports, dirs, settings. Odin turns this into the Ansible inventory."
  value       = merge({ for k, m in module.service : k => m.node }, { for k, m in module.spark_worker : m.node.name => m.node })
}

output "nodes" {
  description = "Every node of the cluster: Odin's Ansible inventory."
  value       = module.cluster.nodes
}

output "addresses" {
  description = "Master URL, REST submission and UI URLs."
  value       = module.cluster.addresses
}

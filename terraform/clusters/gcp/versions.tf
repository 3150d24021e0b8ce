terraform {
  required_version = ">= 1.4"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.0"
    }
  }
  # Odin passes the state's location at init, as for every cluster (a GCS bucket in a real deployment:
  # backend "gcs" with -backend-config=bucket=...).
  backend "local" {}
}

provider "google" {
  project = var.project
  region  = var.region
  zone    = var.zone
}

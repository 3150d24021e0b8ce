terraform {
  required_version = ">= 1.4" # terraform_data is built in from 1.4: no provider to download
}

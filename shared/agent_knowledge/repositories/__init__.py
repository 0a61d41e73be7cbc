"""Small repositories over botocore: the only code that talks to DynamoDB, S3, SQS and Secrets Manager."""

# A fragment of the first-boot user data (bootstrap.sh, ephemeral.sh), inlined where they name it
# (INSTALL_BOX_SCRIPTS); this comment is not.

# The box scripts come from the harness zip (the first one installed here; every sync installs its own).
uri=$(aws ssm get-parameter --region "$REGION" --name "$HARNESS_PARAM" --query Parameter.Value --output text)
tmp=$(mktemp -d)
aws s3 cp --region "$REGION" --only-show-errors "$uri" "$tmp/harness.zip"
python3 -m zipfile -e "$tmp/harness.zip" "$tmp/harness"
bash "$tmp/harness/@@HARNESS_BOX_DIR@@/@@INSTALLER@@" "$tmp/harness"
rm -rf "$tmp"

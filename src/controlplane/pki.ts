// Certificates for a throwaway local control plane: one CA for serving and client certs, one for the front proxy.
// @peculiar/x509 resolves its ASN.1 services through tsyringe, which needs the Reflect metadata polyfill first.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type KeyPair = webcrypto.CryptoKeyPair;

const algorithm = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const signingAlgorithm = { name: 'ECDSA', hash: 'SHA-256' } as const;
const lifetimeMs = 7 * 24 * 3600 * 1000;

export interface PemPair {
  certPem: string;
  keyPem: string;
}

export interface CertificateAuthority extends PemPair {
  issue(request: LeafRequest): Promise<PemPair>;
}

export interface LeafRequest {
  commonName: string;
  organizations?: string[];
  usage: 'server' | 'client';
  dnsNames?: string[];
  ipAddresses?: string[];
}

async function exportKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  const body = der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trimEnd();
  return `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----\n`;
}

async function newKeys(): Promise<KeyPair> {
  return webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
}

function distinguishedName(commonName: string, organizations: string[] = []): string {
  return [`CN=${commonName}`, ...organizations.map((o) => `O=${o}`)].join(', ');
}

export async function createCertificateAuthority(commonName: string): Promise<CertificateAuthority> {
  const keys = await newKeys();
  const now = Date.now();
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    name: distinguishedName(commonName),
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + lifetimeMs),
    signingAlgorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return authority(caCert, keys.privateKey, await exportKeyPem(keys.privateKey));
}

/** A CA from its PEM files (e.g. the test control plane's ca.crt and ca.key), to issue more certificates. */
export async function loadCertificateAuthority(certPem: string, keyPem: string): Promise<CertificateAuthority> {
  const caCert = new x509.X509Certificate(certPem);
  const der = Buffer.from(keyPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, algorithm, true, ['sign']);
  return authority(caCert, privateKey, keyPem);
}

function authority(
  caCert: x509.X509Certificate,
  signingKey: webcrypto.CryptoKey,
  keyPem: string,
): CertificateAuthority {
  const issue = async (request: LeafRequest): Promise<PemPair> => {
    const leafKeys = await newKeys();
    const extensions: x509.Extension[] = [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([
        request.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
      ]),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ];
    const names = [
      ...(request.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
      ...(request.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
    ];
    if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names));
    const cert = await x509.X509CertificateGenerator.create({
      subject: distinguishedName(request.commonName, request.organizations),
      issuer: caCert.subject,
      notBefore: new Date(Date.now() - 60_000),
      notAfter: new Date(Date.now() + lifetimeMs),
      signingAlgorithm,
      publicKey: leafKeys.publicKey,
      signingKey,
      extensions,
    });
    return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(leafKeys.privateKey) };
  };
  return { certPem: caCert.toString('pem'), keyPem, issue };
}

export interface ServingCertificate {
  caPem: string;
  certPem: string;
  keyPem: string;
}

/**
 * Development only (the dev stack, tests, and `api` without --aggregated-tls-dir): a throwaway CA and a serving
 * certificate for the aggregated API's <svc>.<ns>.svc, the name the aggregator checks whatever address it dials.
 */
export async function createServingCertificate(service: {
  namespace: string;
  name: string;
}): Promise<ServingCertificate> {
  const ca = await createCertificateAuthority(`${service.name}-ca`);
  const dns = [
    `${service.name}.${service.namespace}.svc`,
    `${service.name}.${service.namespace}.svc.cluster.local`,
    'localhost',
  ];
  const leaf = await ca.issue({
    commonName: dns[0] as string,
    usage: 'server',
    dnsNames: dns,
    ipAddresses: ['127.0.0.1'],
  });
  return { caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem };
}

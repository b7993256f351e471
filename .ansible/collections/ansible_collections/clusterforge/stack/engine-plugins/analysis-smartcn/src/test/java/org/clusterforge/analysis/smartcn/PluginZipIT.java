package org.clusterforge.analysis.smartcn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.Test;

/**
 * Checks the packaged zip (run by failsafe after {@code package}): the layout that
 * opensearch-plugin install expects, a descriptor for exactly the engine version it was
 * built for, and no jar the engine already ships in lib/.
 */
class PluginZipIT {

    private static final String OPENSEARCH_VERSION = System.getProperty("opensearch.version");
    private static final String LUCENE_VERSION = System.getProperty("lucene.version");
    private static final Path ZIP = Path.of(System.getProperty("plugin.zip"));

    @Test
    void zipHoldsTheDescriptorThePluginJarAndOnlyTheSmartcnLuceneJar() throws IOException {
        Set<String> entries = new TreeSet<>();
        try (ZipFile zip = new ZipFile(ZIP.toFile())) {
            zip.stream().map(ZipEntry::getName).forEach(entries::add);
        }
        assertEquals(
                new TreeSet<>(Set.of(
                        "plugin-descriptor.properties",
                        "analysis-smartcn-" + OPENSEARCH_VERSION + ".jar",
                        "lucene-analysis-smartcn-" + LUCENE_VERSION + ".jar")),
                entries);
    }

    @Test
    void descriptorNamesTheEngineVersionItWasBuiltFor() throws IOException {
        Properties descriptor = new Properties();
        try (ZipFile zip = new ZipFile(ZIP.toFile());
                InputStream in = zip.getInputStream(zip.getEntry("plugin-descriptor.properties"))) {
            descriptor.load(new InputStreamReader(in, StandardCharsets.UTF_8));
        }
        assertEquals("analysis-smartcn", descriptor.getProperty("name"));
        assertEquals(OPENSEARCH_VERSION, descriptor.getProperty("version"));
        assertEquals(OPENSEARCH_VERSION, descriptor.getProperty("opensearch.version"));
        assertEquals("17", descriptor.getProperty("java.version"));
        assertEquals(SmartcnAnalysisPlugin.class.getName(), descriptor.getProperty("classname"));
        assertFalse(descriptor.getProperty("description", "").isBlank());
    }

    @Test
    void zipIsNamedAfterTheEngineVersion() {
        assertEquals("analysis-smartcn-" + OPENSEARCH_VERSION + ".zip", ZIP.getFileName().toString());
        assertTrue(Files.isRegularFile(ZIP));
    }
}

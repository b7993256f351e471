package org.clusterforge.analysis.smartcn;

import org.apache.lucene.analysis.cn.smart.SmartChineseAnalyzer;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractIndexAnalyzerProvider;

/**
 * Provides {@link SmartChineseAnalyzer} with Lucene's default stop set. Like the official
 * plugin it takes no settings: a configurable variant is a custom analyzer built from
 * {@code smartcn_tokenizer} and {@code smartcn_stop}.
 */
public final class SmartcnAnalyzerProvider extends AbstractIndexAnalyzerProvider<SmartChineseAnalyzer> {

    private final SmartChineseAnalyzer analyzer;

    public SmartcnAnalyzerProvider(
            IndexSettings indexSettings, Environment environment, String name, Settings settings) {
        super(indexSettings, name, settings);
        this.analyzer = new SmartChineseAnalyzer(SmartChineseAnalyzer.getDefaultStopSet());
    }

    @Override
    public SmartChineseAnalyzer get() {
        return analyzer;
    }
}
